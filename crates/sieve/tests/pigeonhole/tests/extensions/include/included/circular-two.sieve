require "include";

keep;

include "circular-two-2";


