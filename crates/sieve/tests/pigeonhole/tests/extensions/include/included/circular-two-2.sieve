require "include";

include "circular-two.sieve";
