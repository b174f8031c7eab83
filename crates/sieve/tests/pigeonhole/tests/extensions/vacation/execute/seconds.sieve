require "vacation-seconds";

vacation :seconds 120 :addresses "stephan@example.org" "I'll be back in a few minutes";
keep;
