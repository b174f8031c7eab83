require "include";

include :once "once-3";
