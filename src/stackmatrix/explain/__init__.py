"""`stackmatrix explain`: measure which difference from the baseline causes a verdict.

derive: the differences that can be taken back one at a time (ablations);
search: which group of them to revert next (halving, so n differences cost ~log2 n
rounds); runner: each round is an ordinary run of a derived spec inside the results
directory; explanation: the sentences and figures the report shows.
"""
