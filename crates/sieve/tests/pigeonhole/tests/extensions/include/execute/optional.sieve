require "include";

include :optional "optional-1";
include :optional "optional-2";
include :optional "optional-3";
