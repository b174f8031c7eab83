require "reject";

reject "I am not interested in your nonsense.";
redirect "frop@example.com";
