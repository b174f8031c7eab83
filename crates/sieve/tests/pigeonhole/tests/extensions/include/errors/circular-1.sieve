require "include";

discard;

include "circular-one";
