require "extracttext";
require "variables";

keep;
