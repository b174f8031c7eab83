require "vacation";

vacation "I am on vacation.";
discard;
