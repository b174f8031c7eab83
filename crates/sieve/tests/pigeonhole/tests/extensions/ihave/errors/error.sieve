require "ihave";

error "Something failed.";
