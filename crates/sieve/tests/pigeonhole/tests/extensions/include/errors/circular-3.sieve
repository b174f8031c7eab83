require "include";

discard;

include "circular-three";
