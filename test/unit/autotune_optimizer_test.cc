// Autotune's pure parts: the Gaussian process and the Bayesian optimiser on synthetic
// objectives (runtime/autotune/bayesian_optimizer.h), and the knob space
// (runtime/autotune/knob_space.h).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/autotune/bayesian_optimizer.h"
#include "runtime/autotune/knob_space.h"

namespace chorus::runtime {
namespace {

// A throughput-like objective on the unit square: 3 GB/s at (0.3, 0.7), falling off
// quadratically.
double Quadratic(const std::vector<double>& x) {
  const double dx = x[0] - 0.3, dy = x[1] - 0.7;
  return 3e9 * (1.0 - dx * dx - dy * dy);
}

double DistanceToOptimum(const std::vector<double>& x) {
  return std::hypot(x[0] - 0.3, x[1] - 0.7);
}

// The best point found by `samples` evaluations of the Bayesian optimiser started at `start`.
std::vector<double> OptimiseQuadratic(uint64_t seed, int samples, double noise) {
  BayesianOptimizerOptions options;
  options.seed = seed;
  options.noise = noise;
  BayesianOptimizer bo({false, false}, options);
  std::vector<double> x = {0.9, 0.1};
  for (int i = 0; i < samples; ++i) {
    bo.AddSample(x, Quadratic(x));
    if (i + 1 < samples) x = bo.NextSample();
  }
  return bo.points()[bo.BestSample()];
}

// The best of `samples` uniform random points (the start included), as random search finds it.
std::vector<double> RandomSearch(uint64_t seed, int samples) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> best = {0.9, 0.1};
  for (int i = 1; i < samples; ++i) {
    std::vector<double> x = {unit(rng), unit(rng)};
    if (Quadratic(x) > Quadratic(best)) best = x;
  }
  return best;
}

TEST_CASE("The Gaussian process interpolates its samples and is unsure far from them",
          "[autotune][optimizer]") {
  GaussianProcess gp(/*noise=*/0.0);
  const std::vector<std::vector<double>> x = {{0.1}, {0.4}, {0.5}, {0.9}};
  const std::vector<double> y = {10.0, 30.0, 32.0, 12.0};
  gp.Fit(x, y);
  for (size_t i = 0; i < x.size(); ++i) {
    const GaussianProcess::Prediction p = gp.Predict(x[i]);
    CHECK(p.mean == Approx(y[i]).epsilon(0.01));
    CHECK(p.sd < 0.1);
  }
  // Between two close samples the model is surer than far outside all of them.
  CHECK(gp.Predict({0.45}).sd < gp.Predict({0.7}).sd);
  CHECK(gp.Predict({0.45}).mean > 25.0);
}

TEST_CASE(
    "The Gaussian process attributes to noise what its samples do not explain, within "
    "the configured bound",
    "[autotune][optimizer]") {
  // A smooth function: the fit takes (almost) no noise, although up to 0.8 is allowed.
  std::vector<std::vector<double>> x;
  std::vector<double> smooth, jagged;
  for (int i = 0; i < 12; ++i) {
    const double t = i / 11.0;
    x.push_back({t});
    smooth.push_back(std::sin(3 * t));
    jagged.push_back(std::sin(3 * t) + (i % 2 == 0 ? 0.3 : -0.3));  // measurement noise
  }
  GaussianProcess gp(/*noise=*/0.8);
  gp.Fit(x, smooth);
  CHECK(gp.noise() < 0.01);
  gp.Fit(x, jagged);
  CHECK(gp.noise() > 0.05);
  CHECK(gp.noise() <= 0.8 + 1e-6);
  // Smoothed: the model does not follow each sample's up and down.
  CHECK(std::abs(gp.Predict(x[4]).mean - jagged[4]) > 0.1);
  // A bound of 0 keeps it exact.
  GaussianProcess exact(/*noise=*/0.0);
  exact.Fit(x, jagged);
  CHECK(exact.noise() < 1e-5);
  CHECK(exact.Predict(x[4]).mean == Approx(jagged[4]).epsilon(0.01));
}

TEST_CASE("Expected improvement prefers a better mean and, at equal means, more uncertainty",
          "[autotune][optimizer]") {
  const double best = 10.0;
  CHECK(ExpectedImprovement({12.0, 1.0}, best, 0) > ExpectedImprovement({11.0, 1.0}, best, 0));
  CHECK(ExpectedImprovement({10.0, 2.0}, best, 0) > ExpectedImprovement({10.0, 1.0}, best, 0));
  CHECK(ExpectedImprovement({8.0, 0.0}, best, 0) == 0.0);
  CHECK(ExpectedImprovement({12.0, 0.0}, best, 0) == Approx(2.0));
  CHECK(ExpectedImprovement({9.0, 1.0}, best, 0) > 0.0);
}

TEST_CASE("The optimiser is deterministic given its seed", "[autotune][optimizer]") {
  auto run = [](uint64_t seed) {
    BayesianOptimizerOptions options;
    options.seed = seed;
    BayesianOptimizer bo({false, false, true}, options);
    std::vector<std::vector<double>> points;
    std::vector<double> x = {0.5, 0.5, 0.0};
    for (int i = 0; i < 8; ++i) {
      bo.AddSample(x, Quadratic(x) + (x[2] == 1.0 ? 1e8 : 0.0));
      x = bo.NextSample();
      points.push_back(x);
    }
    return points;
  };
  CHECK(run(7) == run(7));
  CHECK(run(7) != run(8));
}

TEST_CASE("Binary dimensions take only 0 or 1, continuous ones stay in the cube",
          "[autotune][optimizer]") {
  BayesianOptimizerOptions options;
  options.seed = 3;
  BayesianOptimizer bo({false, true, false}, options);
  std::vector<double> x = {0.2, 0.0, 0.9};
  for (int i = 0; i < 12; ++i) {
    bo.AddSample(x, -std::abs(x[0] - 0.5) + x[1]);
    x = bo.NextSample();
    REQUIRE(x.size() == 3);
    CHECK((x[1] == 0.0 || x[1] == 1.0));
    for (double v : x) CHECK((v >= 0.0 && v <= 1.0));
  }
  // The binary dimension that adds a whole unit is found.
  CHECK(bo.points()[bo.BestSample()][1] == 1.0);
}

TEST_CASE(
    "On a 2-D quadratic the optimiser finds the optimum in a few samples, better than "
    "random search",
    "[autotune][optimizer]") {
  const double noise = GENERATE(0.01, 0.8);
  INFO("noise " << noise);
  constexpr int kSamples = 12;
  int closer = 0;
  double bo_total = 0, random_total = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const double bo = DistanceToOptimum(OptimiseQuadratic(seed, kSamples, noise));
    const double random = DistanceToOptimum(RandomSearch(seed, kSamples));
    INFO("seed " << seed << ": optimiser " << bo << ", random search " << random);
    // Within 0.1 of the optimum in the unit square: 99% of the best score.
    CHECK(bo < 0.1);
    closer += bo < random ? 1 : 0;
    bo_total += bo;
    random_total += random;
  }
  CHECK(closer >= 8);
  CHECK(bo_total < random_total / 2);
}

TEST_CASE("The knob space maps parameters to the cube and back", "[autotune][knobs]") {
  const KnobSpace space(/*hierarchical_allreduce=*/false);
  REQUIRE(space.dims() == 4);
  CHECK(space.BinaryDims() == std::vector<bool>(4, false));
  const TunedParameters p{int64_t{16} << 20, int64_t{1} << 20, int64_t{64} << 10,
                          absl::Microseconds(1600), std::nullopt};
  const std::vector<double> x = space.Encode(p);
  for (double v : x) CHECK((v >= 0.0 && v <= 1.0));
  CHECK(space.Decode(x) == p);
  // The ends of each range.
  const TunedParameters lo = space.Decode({0, 0, 0, 0});
  CHECK(lo.fusion_threshold_bytes == 64 << 10);
  CHECK(lo.pipeline_chunk_bytes == 64 << 10);
  CHECK(lo.inplace_min_bytes == 4 << 10);
  CHECK(lo.cycle_time == absl::Microseconds(100));
  const TunedParameters hi = space.Decode({1, 1, 1, 1});
  CHECK(hi.fusion_threshold_bytes == int64_t{256} << 20);
  CHECK(hi.pipeline_chunk_bytes == int64_t{64} << 20);
  CHECK(hi.inplace_min_bytes == int64_t{64} << 20);
  CHECK(hi.cycle_time == absl::Milliseconds(25));
  // Values outside a range are clamped; decoded values are rounded to whole units.
  const TunedParameters out{0, 4096, 0, absl::Seconds(1), true};
  CHECK(space.Encode(out) == std::vector<double>{0, 0, 0, 1});
  const TunedParameters mid = space.Decode({0.37, 0.41, 0.53, 0.29});
  CHECK(mid.fusion_threshold_bytes % 4096 == 0);
  CHECK(mid.pipeline_chunk_bytes % 4096 == 0);
  CHECK(mid.inplace_min_bytes % 1024 == 0);
  CHECK(absl::ToInt64Nanoseconds(mid.cycle_time) % 1000 == 0);
  CHECK_FALSE(mid.hierarchical_allreduce.has_value());
}

TEST_CASE("Hierarchical allreduce is one more, binary, knob where it applies",
          "[autotune][knobs]") {
  const KnobSpace space(/*hierarchical_allreduce=*/true);
  REQUIRE(space.dims() == 5);
  CHECK(space.BinaryDims() == std::vector<bool>{false, false, false, false, true});
  CHECK(space.Decode({0.5, 0.5, 0.5, 0.5, 1.0}).hierarchical_allreduce == true);
  CHECK(space.Decode({0.5, 0.5, 0.5, 0.5, 0.0}).hierarchical_allreduce == false);
  TunedParameters p;
  CHECK(space.Conform(p).hierarchical_allreduce == false);
  p.hierarchical_allreduce = true;
  CHECK(KnobSpace(false).Conform(p).hierarchical_allreduce == std::nullopt);
}

}  // namespace
}  // namespace chorus::runtime
