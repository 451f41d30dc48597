extension JSONValue {
    /// One effect of a merge patch: the key path it touched and the value it left there
    /// (nil where the key was removed).
    public struct PatchEffect: Sendable, Equatable {
        public let path: [String]
        public let value: JSONValue?
    }

    /// Applies an RFC 7386 JSON Merge Patch and reports each key path it changed. Members the
    /// patch adds are appended in its order; members it changes keep their places.
    ///
    /// An object member merges into an existing object; `null` removes a key; anything else
    /// replaces. Effects that change nothing are not reported, so the effects applied in order to
    /// the old value give the new value.
    public mutating func applyMergePatch(_ patch: JSONValue) -> [PatchEffect] {
        var effects: [PatchEffect] = []
        merge(patch, at: [], effects: &effects)
        return effects
    }

    /// The result of applying `patch` to nothing: the patch with its nulls removed.
    public static func mergePatchResult(_ patch: JSONValue) -> JSONValue {
        var value = JSONValue.object([:])
        var ignored: [PatchEffect] = []
        value.merge(patch, at: [], effects: &ignored)
        return value
    }

    private mutating func merge(_ patch: JSONValue, at path: [String], effects: inout [PatchEffect]) {
        guard case .object(let members) = patch else {
            if self != patch {
                self = patch
                effects.append(PatchEffect(path: path, value: patch))
            }
            return
        }
        guard case .object(var target) = self else {
            let replacement = Self.mergePatchResult(patch)
            self = replacement
            effects.append(PatchEffect(path: path, value: replacement))
            return
        }
        // Take the members out so they stay uniquely referenced while they are edited. Members
        // the patch adds go at the end, in the patch's order; the others keep their places.
        self = .null
        for (written, member) in members {
            // A member named in another Unicode form is the same member (String equality is
            // canonical equivalence): its path is named as it is stored, never as written, so
            // a subscriber applying the effect finds the member it already holds.
            let key = target.index(forKey: written).map { target.keys[$0] } ?? written
            let childPath = path + [key]
            if member == .null {
                if target.removeValue(forKey: key) != nil {
                    effects.append(PatchEffect(path: childPath, value: nil))
                }
            } else if case .object = member, let index = target.index(forKey: key), target.values[index].objectValue != nil {
                target.values[index].merge(member, at: childPath, effects: &effects)
            } else {
                let replacement = member.objectValue != nil ? Self.mergePatchResult(member) : member
                if target[key] != replacement {
                    target[key] = replacement
                    effects.append(PatchEffect(path: childPath, value: replacement))
                }
            }
        }
        self = .object(target)
    }
}
