require "fileinto";

fileinto "FROP";
