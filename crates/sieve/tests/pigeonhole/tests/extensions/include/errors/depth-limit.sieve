require "include";

include :personal "depth-limit-1";
