require "relational";

# Not a valid relation (1)
if header :value "gr" "from" "ah" {
	keep;
}

# Not a valid relation (1)
if header :count "lf" "from" "eek" {
	keep;
}
