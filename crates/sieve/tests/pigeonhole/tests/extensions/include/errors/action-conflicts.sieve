require "include";

include "action-fileinto";
include "action-reject";
