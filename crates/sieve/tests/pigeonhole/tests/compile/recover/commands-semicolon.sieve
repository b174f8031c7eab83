
keep;

discard;

# Missing semicolon
keep

redirect "frop@nl.example.com";

discard;

# Missing semicolon
keep

redirect "frml@nl.example.com";
