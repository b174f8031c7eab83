require "fileinto";

fileinto "aaaa";
