require "reject";

reject "Message is not appreciated.";
reject "No, really, it is not appreciated.";
