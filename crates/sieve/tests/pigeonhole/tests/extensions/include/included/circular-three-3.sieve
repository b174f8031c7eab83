require "include";

include "circular-three.sieve";
