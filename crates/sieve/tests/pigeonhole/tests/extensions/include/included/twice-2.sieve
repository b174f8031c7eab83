require "include";
require "variables";

global "result";

set "result" "${result} THREE";

include "twice-1";
