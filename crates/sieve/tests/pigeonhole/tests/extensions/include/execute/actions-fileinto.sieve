require "include";

include "actions-fileinto1";
include "actions-fileinto2";
include "actions-fileinto3";
