require "fileinto";

fileinto "INBOX";

