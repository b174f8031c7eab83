require "reject";

reject "Ik heb geen zin in die rommel.";
