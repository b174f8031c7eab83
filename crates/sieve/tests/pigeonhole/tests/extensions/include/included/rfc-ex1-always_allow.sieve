if header :is "From" "boss@example.com"
{
	keep;
}
elsif header :is "From" "ceo@example.com"
{
	keep;
}
