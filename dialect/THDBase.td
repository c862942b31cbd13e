//===- THDBase.td - thd dialect, attributes, constraints ---*- tablegen -*-===//
//
// The `thd` dialect states the packed-sequence (THD) data-preparation steps of
// LLM training as ops over builtin tensors.
//
//===----------------------------------------------------------------------===//

#ifndef THD_BASE_TD
#define THD_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"

def THD_Dialect : Dialect {
  let name = "thd";
  let cppNamespace = "::mlir::thd";
  let summary = "Packed-sequence (THD) data preparation for LLM training";
  let description = [{
    Large-model training packs variable-length sequences into one buffer
    ("THD": tokens x heads x dim, no batch axis) described by cumulative
    lengths: `cu_seqlens` (valid, compact coordinates) and
    `cu_seqlens_padded` (physical offsets in the buffer). The ops of this
    dialect are the steps that prepare one microbatch before attention:
    per-sequence alignment, packing, the padding mask, sanitising padded
    slots, context-parallel (CP) slicing, position ids, tail padding and
    padding of the `cu_seqlens` arrays to a static number of entries.

    Configuration values (cp, alignments, capacities) are attributes that
    are either integer literals or expressions over the pipeline parameters
    declared on the enclosing module:

    ```mlir
    module attributes {thd.params = {C = 8192 : i64, cp = 2 : i64, N = 64 : i64}} {
      func.func @f(%x: tensor<?xi64> {thd.capacity = "C*cp"}) ...
    }
    ```

    The declared defaults can be overridden for one compile: the drivers
    (`thdc`, `thd-run`, the JIT and the Python module) write the values given
    to them (`--param NAME=VALUE`, or the `params` of a compile call) into
    the module's `thd.params` after parsing and before verifying it, and
    `thd-opt` does the same with the `thd-set-params` pass. The parameters
    are part of the IR: a module verifies and compiles the same way in every
    process and context, and one compile leaves nothing behind for the
    next. Naming a parameter that the module does not declare is an error.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Attribute names used on modules and function arguments/results.
    static constexpr llvm::StringLiteral kParamsAttrName = "thd.params";
    static constexpr llvm::StringLiteral kCapacityAttrName = "thd.capacity";
    static constexpr llvm::StringLiteral kNameAttrName = "thd.name";
    /// Launch geometry of a lowered kernel, [x, y, z].
    static constexpr llvm::StringLiteral kBlockAttrName = "thd.block";
    static constexpr llvm::StringLiteral kGridAttrName = "thd.grid";
  }];
}

class THD_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<THD_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def THD_ExprAttr : THD_Attr<"Expr", "expr"> {
  let summary = "an integer expression over the pipeline parameters";
  let description = [{
    An expression such as `"C*cp"` or `"N+1"` over the parameters declared in
    the enclosing module's `thd.params`: integer literals, parameter names,
    `+`, `-`, `*`, `/` (exact division) and parentheses. It is evaluated
    with the values in `thd.params` (the declared defaults, or the values a
    driver or `thd-set-params` wrote there); the `thd-bind-params` pass
    replaces it by its value.
  }];
  let parameters = (ins StringRefParameter<"the expression text">:$text);
  let assemblyFormat = "`<` $text `>`";
  let genVerifyDecl = 1;
}

/// An integer configuration value: an `i64` literal or a parameter expression.
def THD_IntOrParamAttr : Attr<
    Or<[CPred<"::llvm::isa<::mlir::thd::ExprAttr>($_self)">,
        And<[CPred<"::llvm::isa<::mlir::IntegerAttr>($_self)">,
             CPred<"::llvm::cast<::mlir::IntegerAttr>($_self).getType().isSignlessInteger(64)">]>]>,
    "64-bit integer or parameter expression"> {
  let storageType = "::mlir::Attribute";
  let returnType = "::mlir::Attribute";
  let convertFromStorage = "$_self";
}

/// A fill value for padded rows: an integer, a float, or true/false.
def THD_FillAttr : Attr<
    Or<[CPred<"::llvm::isa<::mlir::BoolAttr>($_self)">,
        And<[CPred<"::llvm::isa<::mlir::IntegerAttr>($_self)">,
             CPred<"::llvm::cast<::mlir::IntegerAttr>($_self).getType().isSignlessInteger(64)">]>,
        And<[CPred<"::llvm::isa<::mlir::FloatAttr>($_self)">,
             CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getType().isF64()">]>]>,
    "fill value (i64, f64 or bool)"> {
  let storageType = "::mlir::TypedAttr";
  let returnType = "::mlir::TypedAttr";
  let convertFromStorage = "$_self";
}

def THD_CpMode : I32EnumAttr<"CpMode", "context-parallel partitioning", [
    I32EnumAttrCase<"zigzag", 0>,
    I32EnumAttrCase<"contiguous", 1>]> {
  let cppNamespace = "::mlir::thd";
  let genSpecializedAttr = 0;
}
def THD_CpModeAttr : EnumAttr<THD_Dialect, THD_CpMode, "cp_mode">;

def THD_TailPolicy : I32EnumAttr<"TailPolicy", "what covers the tail rows", [
    I32EnumAttrCase<"append_dummy_sequence", 0>,
    I32EnumAttrCase<"extend_last", 1>,
    I32EnumAttrCase<"none", 2>,
    I32EnumAttrCase<"split_dummy_sequences", 3>]> {
  let cppNamespace = "::mlir::thd";
  let genSpecializedAttr = 0;
}
def THD_TailPolicyAttr : EnumAttr<THD_Dialect, THD_TailPolicy, "tail_policy">;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

/// A cumulative-offset array (`cu_seqlens`, `cu_seqlens_padded`).
def THD_CuSeqlens : 1DTensorOf<[I32]>;
/// A 1-D tensor of lengths.
def THD_Lengths : 1DTensorOf<[I32]>;
/// A device-resident scalar (`num_seqs`, `cp_rank`, `max_seqlen`).
def THD_Scalar : Type<And<[
      CPred<"::llvm::isa<::mlir::RankedTensorType>($_self)">,
      CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getShape() == ::llvm::ArrayRef<int64_t>{1}">,
      CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getElementType().isSignlessInteger(32)">]>,
    "tensor<1xi32>">,
  BuildableType<"::mlir::RankedTensorType::get({1}, $_builder.getI32Type())">;
/// Token-like data: ids, labels, positions (integers) or loss masks (floats).
def THD_TokenData : 1DTensorOf<[AnySignlessInteger, AnyFloat]>;
/// The padding mask, true on padding rows.
def THD_Mask : 1DTensorOf<[I1]>;

#endif // THD_BASE_TD
