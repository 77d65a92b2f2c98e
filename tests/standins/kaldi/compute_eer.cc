// ivectorbin/compute-eer.cc

// Copyright 2013  Daniel Povey

// See ../../COPYING for clarification regarding multiple authors
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//  http://www.apache.org/licenses/LICENSE-2.0
//
// THIS CODE IS PROVIDED *AS IS* BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
// KIND, EITHER EXPRESS OR IMPLIED, INCLUDING WITHOUT LIMITATION ANY IMPLIED
// WARRANTIES OR CONDITIONS OF TITLE, FITNESS FOR A PARTICULAR PURPOSE,
// MERCHANTABLITY OR NON-INFRINGEMENT.
// See the Apache 2 License for the specific language governing permissions and
// limitations under the License.

// audiorepro: ComputeEer below is Kaldi's own, copied verbatim from kaldi-asr/kaldi commit
// f4007661023b98b8081fd875029f0dee62242fd1, src/ivectorbin/compute-eer.cc (lines 24-73).
// Only what surrounds it differs: Kaldi's headers are replaced by the two definitions it
// needs (BaseFloat is float, KALDI_ASSERT asserts), and main reads the same input as
// compute-eer ("SCORE target|nontarget" per line, scores read as float) and prints the EER
// as a proportion with 9 significant digits (compute-eer prints 100 * EER to 4).

#include <sys/types.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

typedef float BaseFloat;
#define KALDI_ASSERT(cond) assert(cond)


namespace kaldi {

/**
   ComputeEer computes the Equal Error Rate (EER) for the given scores
   and returns it as a proportion beween 0 and 1.
   If we set the threshold at x, then the target error-rate is the
   proportion of target_scores below x; and the non-target error-rate
   is the proportion of non-target scores above x.  We seek a
   threshold x for which these error rates are the same; this
   error rate is the EER.

   We compute this by iterating over the positions in target_scores: 0, 1, 2,
   and so on, and for each position consider whether the cutoff could be here.
   For each of these position we compute the corresponding position in
   nontarget_scores where the cutoff would be if the EER were the same.
   For instance, if the vectors had the same length, this would be position
   length() - 1, length() - 2, and so on.  As soon as the value at that
   position in nontarget_scores at that position is less than the value from
   target_scores, we have our EER.

   In coding this we weren't particularly careful about edge cases or
   making sure whether it's actually n + 1 instead of n.
*/

BaseFloat ComputeEer(std::vector<BaseFloat> *target_scores,
                     std::vector<BaseFloat> *nontarget_scores,
                     BaseFloat *threshold) {
  KALDI_ASSERT(!target_scores->empty() && !nontarget_scores->empty());
  std::sort(target_scores->begin(), target_scores->end());
  std::sort(nontarget_scores->begin(), nontarget_scores->end());
  
  size_t target_position = 0,
      target_size = target_scores->size();
  for (; target_position + 1 < target_size; target_position++) {
    ssize_t nontarget_size = nontarget_scores->size(),
        nontarget_n = nontarget_size * target_position * 1.0 / target_size,
        nontarget_position = nontarget_size - 1 - nontarget_n;
    if (nontarget_position  < 0)
      nontarget_position = 0;
    if ((*nontarget_scores)[nontarget_position] <
        (*target_scores)[target_position])
      break;
  }
  *threshold = (*target_scores)[target_position];
  BaseFloat eer = target_position * 1.0 / target_size;
  return eer;
}


}

int main() {
  std::vector<BaseFloat> target_scores, nontarget_scores;
  char label[64];
  char number[128];
  while (std::scanf("%127s %63s", number, label) == 2) {
    BaseFloat score = std::strtof(number, nullptr);
    if (std::strcmp(label, "target") == 0)
      target_scores.push_back(score);
    else if (std::strcmp(label, "nontarget") == 0)
      nontarget_scores.push_back(score);
    else
      return 2;
  }
  if (target_scores.empty() || nontarget_scores.empty()) return 2;
  BaseFloat threshold;
  BaseFloat eer = kaldi::ComputeEer(&target_scores, &nontarget_scores, &threshold);
  std::printf("%.9g\n", eer);
  return 0;
}
