require "include";

keep;

include "circular-three-2";


