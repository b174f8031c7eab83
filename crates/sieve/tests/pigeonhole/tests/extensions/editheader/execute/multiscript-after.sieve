require "editheader";

addheader "X-After" "after";

