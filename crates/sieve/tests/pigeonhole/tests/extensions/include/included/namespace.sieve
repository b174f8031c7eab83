require "include";
require "variables";

set "global.a" "personal";
