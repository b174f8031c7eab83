require "include";
require "fileinto";

global "friep";
global "frop";

fileinto "Frop";
