require "include";

include "circular-three-3";
