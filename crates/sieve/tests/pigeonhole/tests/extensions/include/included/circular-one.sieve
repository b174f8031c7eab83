require "include";

keep;

include "circular-one";
