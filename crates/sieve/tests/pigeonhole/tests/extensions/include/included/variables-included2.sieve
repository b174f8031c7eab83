require "include";
require "variables";

global ["value3", "value4"];

set "global.result2" "${value3} ${value4}";
