require "fileinto";

fileinto "frop";
