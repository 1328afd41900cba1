// File: runtime/ucx/controller_address_exchange.h
//
// An AddressExchange over an existing Controller (gather to rank 0, broadcast back): forms a
// UCX world among ranks that can already talk, e.g. under mpirun with CHORUS_CONTROLLER=ucx,
// where MPI only bootstraps and UCX then carries every collective.
//
// Thread-safety: as the controller (one thread at a time).
#ifndef CHORUS_RUNTIME_UCX_CONTROLLER_ADDRESS_EXCHANGE_H_
#define CHORUS_RUNTIME_UCX_CONTROLLER_ADDRESS_EXCHANGE_H_

#include <string>
#include <vector>

#include "runtime/controller.h"
#include "runtime/ucx/address_exchange.h"

namespace chorus::runtime {

class ControllerAddressExchange final : public AddressExchange {
 public:
  explicit ControllerAddressExchange(Controller* controller) : controller_(controller) {}
  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) override;

 private:
  Controller* controller_;  // borrowed
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_UCX_CONTROLLER_ADDRESS_EXCHANGE_H_
