require "include";

include "once-4";
