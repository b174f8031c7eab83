require "vacation";

vacation :addresses "stephan@example.org" "I am not at home today";
keep;
