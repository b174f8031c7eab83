require "vacation";

vacation "I am not home";
