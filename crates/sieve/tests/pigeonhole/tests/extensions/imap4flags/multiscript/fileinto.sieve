require "fileinto";
require "mailbox";

fileinto :create "folder";
