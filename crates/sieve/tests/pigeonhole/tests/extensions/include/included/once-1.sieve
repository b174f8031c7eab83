require "include";
require "variables";

global "result";

set "result" "${result} ONE";

return;

