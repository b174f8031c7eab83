require "editheader";

addheader "X-Personal" "personal";

