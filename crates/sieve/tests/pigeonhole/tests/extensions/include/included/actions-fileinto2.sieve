require "fileinto";

fileinto "bbbb";

