require "editheader";

addheader "X-Before" "before";

