require "reject";

reject "Message is not wanted.";
