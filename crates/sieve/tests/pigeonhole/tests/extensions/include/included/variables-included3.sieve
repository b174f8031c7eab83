require "include";
require "variables";

global "result1";
global "result2";
global "result";

set "result" "${result1} ${result2}";
