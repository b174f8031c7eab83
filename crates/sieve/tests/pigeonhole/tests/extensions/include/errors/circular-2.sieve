require "include";

discard;

include "circular-two";
