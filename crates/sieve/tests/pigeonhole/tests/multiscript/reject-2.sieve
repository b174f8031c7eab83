require "reject";

reject "Will not accept this nonsense.";
