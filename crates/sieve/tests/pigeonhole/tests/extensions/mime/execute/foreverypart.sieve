require "foreverypart";
require "variables";

foreverypart {
	foreverypart {
		foreverypart {
			foreverypart {
				set "a" "a${a}";
			}
		}
	}
}


