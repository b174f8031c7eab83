require "reject";
require "fileinto";

reject "No nonsense in my mailbox.";
fileinto "Spam";
