require "include";

include :personal :optional "missing_a";
include :personal :optional "missing_aa";
