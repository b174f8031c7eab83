require "editheader";
require "variables";

set "header" "X-field:";

addheader "${header}" "Frop";
